"""What the host can do, measured once: memory bandwidth (bandwidth) and dense compute (compute), the
ceilings the plan and the roofline divide by.

Rooms of measure/ it may import: nothing.
"""
