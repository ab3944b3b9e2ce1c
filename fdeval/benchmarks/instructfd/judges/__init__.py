"""judges"""
