"""wgk.impl"""
