"""The review web app: browse, play and label sessions of run folders (`python -m fdeval.review`).

See docs/review.md; the server is fdeval/review/server.py, the labels fdeval/review/labels.py.
"""
