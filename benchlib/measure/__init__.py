"""The measurement layer: everything that touches a server or a sensor while a run is under way, one room per
concern (each room's __init__ says what it holds and which rooms it may import):

    pacing/     when each request leaves          http/       bytes on the wire
    client/     one request as the API sees it    selfcheck/  the client measuring itself
    traffic/    what a level sends                models/     model files, no server started
    servers/    which server this is, its probes  capacity/   the host's bandwidth and compute
    telemetry/  power, energy, memory, heat       provenance  what was measured, on what

May import: config, records.
"""
