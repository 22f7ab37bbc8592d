"""The client measuring itself: its timing error against a server that stamps each token (calibration,
stamping_server) and its own health during a run (client_health: loop lag, CPU).

Rooms of measure/ it may import: pacing, http, client.
"""
