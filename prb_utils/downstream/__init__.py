"""downstream"""
