"""sandgym.agents"""
