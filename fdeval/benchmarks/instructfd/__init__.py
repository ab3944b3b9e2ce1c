"""benchmarks/instructfd"""
