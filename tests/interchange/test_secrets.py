"""Keys planted by every path another tool's files (and our own params' server.launch) can carry one — URLs with
user info or a query, an environment prefix on the recorded command, quoted and unquoted headers, header lists
and header dictionaries under any name, `--extra-inputs name:value`, the tools' own error messages — are in no
byte an import or its export writes, nor on the terminal, whether plain, URL-encoded or base64-encoded; and the
export names no absolute local path."""

from __future__ import annotations

import base64
import json
import random
import string
from pathlib import Path
from urllib.parse import quote, quote_plus

import pytest

from benchlib import cli
from benchlib.interchange import llmd_export
from benchlib.records import secrets

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
ALPHABET = string.ascii_letters + string.digits


class Keys:
    """Realistic keys of several shapes, each made once and remembered with the forms it may be written in."""

    def __init__(self, seed: int = 53):
        self.rng = random.Random(seed)
        self.made: list[tuple[str, list[str]]] = []  # (where it was planted, the forms to look for)

    def _random(self, n: int, alphabet: str = ALPHABET) -> str:
        return "".join(self.rng.choice(alphabet) for _ in range(n))

    def new(self, where: str, shape: str = "openai") -> str:
        key = {"openai": lambda: "sk-proj-" + self._random(40), "hf": lambda: "hf_" + self._random(34),
               "plain": lambda: self._random(40), "hex": lambda: self._random(32, "0123456789abcdef"),
               "google": lambda: "AIza" + self._random(35),
               "jwt": lambda: "eyJ" + self._random(30) + ".eyJ" + self._random(40) + "." + self._random(43)}[shape]()
        forms = [key, quote(key, safe=""), quote_plus(key), base64.b64encode(key.encode()).decode(),
                 base64.urlsafe_b64encode(key.encode()).decode()]
        self.made.append((where, forms))
        return key

    def basic(self, where: str) -> str:
        """An Authorization: Basic credential: base64 of user:key, looked for in that form too."""
        key = self.new(where, "plain")
        token = base64.b64encode(f"bench:{key}".encode()).decode()
        self.made[-1][1].append(token)
        return token


def plant_aiperf(folder: Path, keys: Keys) -> Path:
    out = folder / "aiperf"
    out.mkdir()
    data = json.loads((FIXTURES / "aiperf" / "profile_export_aiperf.json").read_text())
    command = data["run_info"]["cli_command"]
    data["run_info"]["cli_command"] = (
        f"OPENAI_API_KEY={keys.new('aiperf env prefix')} HF_TOKEN={keys.new('aiperf env prefix hf', 'hf')} "
        + command.replace("--url 'http://127.0.0.1:18431'",
                          f"--url 'http://bench:{keys.new('aiperf url user info', 'plain')}@127.0.0.1:18431"
                          f"/v1?api_key={keys.new('aiperf url query')}'")
        + f" -H Authorization: Bearer {keys.new('aiperf unquoted -H', 'plain')}"
        + f" --header 'x-api-key:{keys.new('aiperf quoted x-api-key header', 'hex')}'"
        + f" --extra-inputs api_key:{keys.new('aiperf --extra-inputs', 'plain')}"
        + f" --api-key={keys.new('aiperf --api-key=', 'hex')}"
        + f" -H 'Cookie: session={keys.new('aiperf cookie header', 'plain')}'")
    endpoint = data["input_config"]["endpoint"]
    endpoint["urls"] = [f"http://admin:{keys.new('aiperf config url user info', 'plain')}@127.0.0.1:18431"
                        f"?token={keys.new('aiperf config url query', 'plain')}"]
    endpoint["api_key"] = keys.new("aiperf config api_key")
    data["input_config"]["input"] = {
        "headers": [["x-goog-api-key", keys.new("aiperf header list x-goog-api-key", "google")],
                    ["api-key", keys.new("aiperf header list api-key", "hex")],
                    ["Authorization", f"Basic {keys.basic('aiperf header list basic auth')}"]],
        "extra": [["api_key", keys.new("aiperf extra pair", "plain")]]}
    data["error_summary"] = [{"error_details": {"code": 401, "type": "Unauthorized", "message":
                              f"rejected Authorization: Bearer {keys.new('aiperf error summary', 'jwt')}"},
                              "count": 1}]
    (out / "profile_export_aiperf.json").write_text(json.dumps(data))
    lines = (FIXTURES / "aiperf" / "profile_export.jsonl").read_text().splitlines()
    record = json.loads(lines[10])
    record["error"] = {"code": 401, "type": "AuthenticationError",
                       "message": f"Incorrect API key provided: {keys.new('aiperf record error', 'plain')}"}
    lines[10] = json.dumps(record)
    (out / "profile_export.jsonl").write_text("\n".join(lines) + "\n")
    return out


def plant_guidellm(folder: Path, keys: Keys) -> Path:
    data = json.loads((FIXTURES / "guidellm" / "benchmarks.json").read_text())
    backend = data["config"]["spec"]["backend"]
    backend["target"] = (f"http://bench:{keys.new('guidellm target user info', 'plain')}@127.0.0.1:18431"
                         f"?key={keys.new('guidellm target query', 'plain')}")
    backend["api_key"] = keys.new("guidellm api_key")
    backend["extras"] = {"headers": {"X-Custom-Auth": keys.new("guidellm header of any name", "plain"),
                                     "Cookie": f"sid={keys.new('guidellm cookie', 'hex')}"}}
    requests = data["benchmarks"][0]["requests"]
    failed = requests["successful"].pop(4)
    failed["info"]["error"] = ("HTTPStatusError: Client error '401 Unauthorized' for url 'http://127.0.0.1:18431/v1/"
                               f"chat/completions?api_key={keys.new('guidellm error url query', 'plain')}' "
                               f"(sent token={keys.new('guidellm error token=', 'hex')})")
    failed["info"]["headers"] = {"authorization": f"Bearer {keys.new('guidellm kept headers', 'plain')}"}
    requests["errored"] = [failed]
    path = folder / "benchmarks.json"
    path.write_text(json.dumps(data))
    return path


def plant_vllm(folder: Path, keys: Keys) -> Path:
    data = json.loads((FIXTURES / "vllm-bench" / "result.json").read_text())
    data["api_key"] = keys.new("vllm --metadata api_key")  # --metadata KEY=VALUE lands at the top of the file
    data["base_url"] = (f"https://bench:{keys.new('vllm base_url user info', 'plain')}@example.lab/v1"
                        f"?sig={keys.new('vllm base_url query', 'plain')}")
    data["headers"] = {"X-Api-Key": keys.new("vllm metadata headers", "hex")}
    data["launch"] = f"HF_TOKEN={keys.new('vllm metadata launch env', 'hf')} vllm serve fake-model"
    data["errors"][3] = ("Traceback (most recent call last):\n  ...\naiohttp.ClientResponseError: 401, message="
                         f"'Unauthorized', url='http://127.0.0.1:18431/v1?key={keys.new('vllm error url', 'plain')}'"
                         f" Bearer {keys.new('vllm error bearer', 'openai')}")
    data["ttfts"][3], data["itls"][3] = 0.0, []
    path = folder / "result.json"
    path.write_text(json.dumps(data))
    return path


def test_keys_from_every_path_reach_no_output_byte_and_no_terminal(outputs, tmp_path, capsys):
    keys = Keys()
    launch = (f"VLLM_API_KEY={keys.new('params launch env prefix')} vllm serve /srv/models/fake "
              f"--api-key {keys.new('params launch --api-key', 'plain')} "
              f"--hf-token={keys.new('params launch --hf-token=', 'hf')}")
    params = tmp_path / "deployment.yaml"
    params.write_text("host:\n  name: bench-box\n  hardware: a fake server on this machine\nserver:\n  kind: openai\n"
                      "  software: fake\n  base_url: http://127.0.0.1:18431\n  model: fake-model\n"
                      f"  launch: {json.dumps(launch)}\n")
    sources = tmp_path / "sources"
    sources.mkdir()
    planted = {"aiperf": plant_aiperf(sources, keys), "guidellm": plant_guidellm(sources, keys),
               "vllm-bench": plant_vllm(sources, keys)}
    assert len(keys.made) >= 24 + 5 + 3
    for tool, source in planted.items():
        assert cli.main(["import-results", "--from", tool, str(source), "--params", str(params)]) == 0
        folder = next(outputs.glob(f"bench-box/*measured-by-{tool}/{tool}"))
        assert cli.main(["export", "--format", "llm-d-report", str(folder)]) == 0
    terminal = capsys.readouterr()
    written = {p: p.read_bytes().decode("utf-8", "replace") for p in outputs.rglob("*") if p.is_file()}
    assert {p.name for p in written} >= {"requests.csv", "manifest.json", llmd_export.REPORT_NAME}
    leaks = [(where, str(path.relative_to(outputs))) for where, forms in keys.made
             for path, text in {**written, Path("terminal"): terminal.out + terminal.err}.items()
             if any(form in text for form in forms)]
    assert leaks == []
    # what the rule left in place of the planted keys is still read as what it was
    manifest = json.loads(next(outputs.glob("bench-box/*aiperf/aiperf/manifest.json")).read_text())
    command = manifest["measured_by"]["command"]
    assert "OPENAI_API_KEY=*** HF_TOKEN=*** aiperf profile --model fake-model" in command
    assert "--url http://127.0.0.1:18431/v1 " in command and "--api-key=***" in command
    assert "-H Authorization: ***" in command and "--extra-inputs api_key:***" in command
    assert manifest["aggregates"]["input_config"]["input"]["headers"][0] == ["x-goog-api-key", "***"]
    assert manifest["params"]["server"]["launch"] == \
        "VLLM_API_KEY=*** vllm serve /srv/models/fake --api-key *** --hf-token=***"
    # the export carries no absolute local path: the tool's tokenizer and artifact folders, our model path, the
    # source files
    for path, text in written.items():
        if path.name == llmd_export.REPORT_NAME:
            for local in ("/work/", "/tmp/", "/srv/", str(tmp_path), str(Path.home())):
                assert local not in text, (path, local)


@pytest.mark.parametrize("text,kept,gone", [
    ("curl -H Authorization: Bearer abc.def-123 http://h/v1", ["curl -H Authorization: ***"], ["abc.def-123"]),
    ("X_API_KEY='a b' aiperf profile --url=http://u:p@h:1/x?y=1#z", ["X_API_KEY=***", "--url=http://h:1/x"],
     ["a b", "u:p", "y=1", "#z"]),
    ("vllm serve m --api-key", ["vllm serve m --api-key"], []),  # a flag with nothing after it
    ("aiperf 'unbalanced --api-key k3y", ["***"], ["k3y"]),  # a command shlex cannot split: still no key
])
def test_the_command_rule_splits_words_and_redacts_secret_flags_and_env_prefixes(text, kept, gone):
    clean = secrets.redact_command(text)
    assert all(part in clean for part in kept), clean
    assert not any(part in clean for part in gone), clean


def test_key_shaped_text_is_scrubbed_and_ordinary_text_is_not():
    text = ("401 Unauthorized: token=s3cr3tValue, key sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWx12, "
            "x-goog-api-key: AIzaSyA1b2C3d4E5f6G7h8I9j0KlMnOpQrStUvW, hash 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b"
            "2b0b822cd15d6c15b0f00a08, request 040e85d9-b5b7-4fff-b7ba-9d4f49e75daa, model "
            "DeepSeek-R1-Distill-Qwen-32B-Instruct, max_tokens=16")
    clean = secrets.clean_text(text)
    for secret in ("s3cr3tValue", "sk-ant-api03", "AIzaSyA1b2"):
        assert secret not in clean
    for kept in ("9f86d081884c7d659a2feaa0c55ad015", "040e85d9-b5b7-4fff-b7ba-9d4f49e75daa",
                 "DeepSeek-R1-Distill-Qwen-32B-Instruct", "max_tokens=16"):
        assert kept in clean

