"""transcript"""
