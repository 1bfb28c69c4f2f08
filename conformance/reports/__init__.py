"""wgk.conformance.reports"""
