"""The config layer: what a run is told before it starts — paths, params files (params; the sections' common base:
sections; the load workloads' sections: workload_params), task definitions (graded sets' items drawn from their
libraries: graded), the server profiles (which server a deployment is and what it answers where: servers) and the
metric registry (every metric declared once: name, unit, direction, how it is computed).

May import: nothing from benchlib outside this folder.
"""
