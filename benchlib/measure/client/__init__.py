"""One request as the API sees it: the protocol backends (backends: OpenAI chat, completions, the SDK), the
request bodies (payloads, transcription) and how a streamed answer is timed (timing: a chunk is not a token).

Rooms of measure/ it may import: pacing, http.
"""
