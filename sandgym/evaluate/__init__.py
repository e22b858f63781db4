"""sandgym.evaluate"""
