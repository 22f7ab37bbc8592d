"""Against real servers: the embedded llama.cpp, a real vLLM, real S3 and SFTP servers (slow)."""
