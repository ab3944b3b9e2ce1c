"""fdeval: batch evaluation of full-duplex spoken dialogue models (Instruct-FD, EchoChain, TACT)."""

__version__ = "0.1.0"
