"""sandgym.train"""
