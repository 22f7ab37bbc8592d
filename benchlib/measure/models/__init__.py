"""Model files, without starting a server: a GGUF header read in bounds (gguf_header), quantizing a model
(quantize), a random model of a given shape for the GPU check (random_model) and a matching multimodal
projector (projector).

Rooms of measure/ it may import: nothing.
"""
