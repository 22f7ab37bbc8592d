"""Stands in for the rfc3987-syntax package in the local test cluster's processes only (tools/fleet_cluster.py puts
this folder first on their PYTHONPATH): jsonschema imports it when installed, and it builds a Lark grammar at
import, about 2 of the 2.7 s of CPU `import ray` costs in each Ray process. The raylet gives its dashboard agent 15 s
to start; three nodes' agents, workers and API server importing at once on a busy 2-core machine missed that and the
nodes died at startup. Absent, jsonschema leaves out its "iri" format checks, which nothing on this path uses."""

raise ImportError("rfc3987_syntax is left out of the local test cluster (tools/ray_local says why)")
