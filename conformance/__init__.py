"""wgk.conformance"""
