"""A deployment's one identity (config.identity.Deployment): its name is its key, built the same from validated
params and from a manifest's record of them; the published reference numbers' 'model @ host' form is the one other
form, and a key of either form gives back its model."""

import pandas as pd

from benchlib.config.identity import Deployment, keys, short_labels
from benchlib.config.params import load_params
from benchlib.config.paths import PROJECT_ROOT


def test_the_name_leaves_out_what_is_not_known_and_is_the_key():
    full = Deployment("gemma3-270m", "llama-cpp-python", "demo", "local-cpu")
    assert full.name == "gemma3-270m · llama-cpp-python · demo · local-cpu" == full.key
    assert Deployment("gemma3-270m", host="local-cpu").name == "gemma3-270m · local-cpu"
    assert Deployment("gemma3-270m", settings="slow").key == "gemma3-270m · slow"
    assert short_labels([full.name, Deployment("gemma3-270m", "llama-cpp-python", "slow", "local-cpu").name]) == {
        full.name: "demo", "gemma3-270m · llama-cpp-python · slow · local-cpu": "slow"}


def test_a_manifests_record_names_the_deployment_as_its_params_do():
    params = load_params(PROJECT_ROOT / "params" / "embedded.yaml")
    recorded = Deployment.from_recorded(params.sections())
    assert recorded == Deployment.from_params(params)
    assert recorded.server == "llama-cpp-python" and recorded.host == params.host.name
    # the folders stand in for what the record lacks; the server's kind where it names no software
    assert Deployment.from_recorded({}, host="box", model="tiny") == Deployment("tiny", host="box")
    assert Deployment.from_recorded({"server": {"model": "m", "kind": "vllm", "variant": "tp2"}}, host="box") \
        == Deployment("m", "vllm", "tp2", "box")


def test_the_published_form_and_the_model_of_either_form():
    assert Deployment.published("Gemma 4 E2B", "RTX 3090 host") == "Gemma 4 E2B @ RTX 3090 host"
    assert Deployment.model_of("Gemma 4 E2B @ RTX 3090 host") == "Gemma 4 E2B"
    assert Deployment.model_of(Deployment("tiny", "vllm", "tp2", "box").key) == "tiny"


def test_rows_are_keyed_by_their_system_column_else_by_model_and_host():
    rows = pd.DataFrame({"model": ["a", "b"], "host": ["h1", "h2"]})
    assert keys(rows).tolist() == ["a · h1", "b · h2"]
    named = rows.assign(system=["a · vllm · h1", "b · vllm · h2"])
    assert keys(named).tolist() == ["a · vllm · h1", "b · vllm · h2"]
