"""Servers this tool starts on the local machine, one engine per module behind the same interface
(start on a free 127.0.0.1 port, wait until ready, report timings, stop with the whole process group).
"""
