"""Deployment files agree with the code: compose.yaml, k8s/, Procfile, Dockerfile and env.example.

Reliability rules checked here: every process runs a real `afpbench` command with real options (parsed by
the CLI itself); the execution workers of each mode are the provider table's families, rendered from it
(tests/infra_workers.py); every queue named exists and every queue is consumed; one beat (reconciler) only; the
broker never evicts and persists; the schema is migrated before anything uses it; only settings the code
reads are set; secrets are never committed (placeholders only).
"""

from __future__ import annotations

import re
import shlex
from functools import lru_cache
from pathlib import Path

import pytest
import typer
import yaml

from afpbench.api import cli
from afpbench.workers.celery_app import QUEUES
from afpbench.workers.providers.families import FAMILIES, PROVIDERS
from afpbench.workers.settings import Settings
from afpbench.workers.store.models import Phase
from tests import infra_workers

REPO = Path(__file__).resolve().parents[2]
INFRA = REPO / "infra"
PLACEHOLDER = "change-me"
PROVIDER_KEY = re.compile(r"^[A-Z][A-Z0-9_]*_API_KEY$")
SECRET_NAME = re.compile(r"KEY|TOKEN|PASSWORD|SECRET")
LOOKS_LIKE_A_REAL_KEY = re.compile(r"sk-[A-Za-z0-9_-]{16,}|AIza[0-9A-Za-z_-]{30,}|xox[bp]-|-----BEGIN")

COMPOSE = yaml.safe_load((INFRA / "compose.yaml").read_text())
K8S = [doc for f in sorted((INFRA / "k8s").glob("*.yaml")) for doc in yaml.safe_load_all(f.read_text()) if doc]
SECRETS = {d["metadata"]["name"]: d for d in K8S if d["kind"] == "Secret"}
CONFIGMAPS = {d["metadata"]["name"]: d for d in K8S if d["kind"] == "ConfigMap"}
DEPLOYMENTS = {d["metadata"]["name"]: d for d in K8S if d["kind"] == "Deployment"}
SCALED = [d for d in K8S if d["kind"] == "ScaledObject"]
PROCFILE = {
    name: shlex.split(cmd)
    for name, cmd in re.findall(r"^([A-Za-z0-9_-]+):\s*(.+)$", (INFRA / "Procfile").read_text(), re.M)
}


def afp_services() -> dict[str, dict]:
    return {n: s for n, s in COMPOSE["services"].items() if str(s.get("image", "")).startswith("afpbench")}


def pod_containers(doc: dict) -> list[dict]:
    spec = doc["spec"]["template"]["spec"]
    return [c for c in spec.get("initContainers", []) + spec["containers"] if c["image"].startswith("afpbench")]


def all_commands() -> list[tuple[str, list[str]]]:
    out = [(f"compose:{n}", [str(a) for a in s["command"]]) for n, s in afp_services().items()]
    for doc in K8S:
        if doc["kind"] in ("Deployment", "Job"):
            out += [(f"k8s:{doc['metadata']['name']}/{c['name']}", c["args"]) for c in pod_containers(doc)]
    for name, argv in PROCFILE.items():
        assert argv[0] == "afpbench", f"Procfile {name}: runs {argv[0]!r}, not afpbench"
        out.append((f"Procfile:{name}", argv[1:]))
    return out


@lru_cache(maxsize=1)
def cli_root():
    return typer.main.get_command(cli.app)


def parse_cli(args: list[str]):
    """Resolve `afpbench ARGS` to its command and parse its options exactly as the CLI would.

    Returns (command path, parsed context). Typer builds on its own copy of click, so groups are recognised
    by their `commands` mapping rather than by class.
    """
    command = cli_root()
    path: list[str] = []
    rest = list(args)
    while hasattr(command, "commands"):
        assert rest, f"`afpbench {' '.join(path)}` needs a subcommand"
        name = rest.pop(0)
        sub = command.commands.get(name)
        assert sub is not None, (
            f"`afpbench {' '.join([*path, name])}` is not a command of api.cli.app "
            f"(known: {', '.join(sorted(command.commands))})"
        )
        path.append(name)
        command = sub
    return " ".join(path), command.make_context(" ".join(["afpbench", *path]), rest)


def queues_of(args: list[str]) -> list[str]:
    if args[0] != "worker":
        return []
    _, ctx = parse_cli(args)
    return [q for q in ctx.params["queues"].split(",") if q]


@lru_cache(maxsize=1)
def allowed_env_names() -> frozenset[str]:
    """AFP_* names that Settings reads, plus AFP_* names the code spells out as a whole string literal
    (read from os.environ directly, e.g. AFP_LOG_LEVEL, or through a constant, e.g. AFP_FLOWER_USER)."""
    names = {f"AFP_{field.upper()}" for field in Settings.model_fields}
    pattern = re.compile(r"""["'](AFP_[A-Z0-9_]+)["']""")
    for package in ("api", "workers", "scoring"):
        for path in (REPO / package).rglob("*.py"):
            names |= set(pattern.findall(path.read_text()))
    return frozenset(names)


def env_name_ok(name: str) -> bool:
    return name in allowed_env_names() or bool(PROVIDER_KEY.match(name))


@pytest.mark.parametrize("where,args", all_commands(), ids=[w for w, _ in all_commands()])
def test_every_process_runs_an_existing_afpbench_command_with_existing_options(where, args):
    parse_cli(args)  # raises on an unknown command, an unknown option or a value of the wrong type


@pytest.mark.parametrize("path", list(infra_workers.TEMPLATES), ids=lambda p: p.name)
def test_each_familys_exec_worker_is_declared_as_the_provider_table_renders_it(path):
    """A family added to workers/providers/families.py gets its worker in every deployment mode."""
    assert path.read_text() == infra_workers.rendered(path), (
        f"{path.relative_to(REPO)} is out of step with the provider table: run `python -m tests.infra_workers`"
    )


@pytest.mark.parametrize("mode", ["compose", "k8s", "Procfile"])
def test_every_queue_named_exists_and_every_queue_has_a_worker(mode):
    consumed = [q for where, args in all_commands() if where.startswith(mode) for q in queues_of(args)]
    assert set(consumed) <= set(QUEUES), f"{mode}: unknown queues {set(consumed) - set(QUEUES)}"
    assert set(QUEUES) <= set(consumed), f"{mode}: nobody consumes {set(QUEUES) - set(consumed)}"


def test_exactly_one_reconciler_beat_per_deployment_mode():
    def beats(mode):
        return [w for w, a in all_commands() if w.startswith(mode) and "--beat" in a]

    assert len(beats("compose")) == len(beats("k8s")) == len(beats("Procfile")) == 1
    (k8s_beat,) = beats("k8s")
    deployment = DEPLOYMENTS[k8s_beat.split(":")[1].split("/")[0]]
    assert deployment["spec"]["replicas"] == 1 and deployment["spec"]["strategy"]["type"] == "Recreate"
    assert deployment["metadata"]["name"] not in {s["spec"]["scaleTargetRef"]["name"] for s in SCALED}
    compose_beat = COMPOSE["services"][beats("compose")[0].split(":")[1]]
    assert compose_beat.get("deploy", {}).get("replicas", 1) == 1


def test_redis_persists_and_never_evicts_queued_messages():
    command = " ".join(COMPOSE["services"]["redis"]["command"])
    assert "--appendonly yes" in command and "--maxmemory-policy noeviction" in command
    assert COMPOSE["services"]["redis"]["volumes"]


def test_postgres_16_keeps_its_data_in_a_volume_and_has_a_healthcheck():
    pg = COMPOSE["services"]["postgres"]
    assert pg["image"].startswith("postgres:16")
    assert any(v.endswith(":/var/lib/postgresql/data") and v.split(":")[0] in COMPOSE["volumes"]
               for v in pg["volumes"])
    assert "pg_isready" in " ".join(pg["healthcheck"]["test"])


def test_schema_is_migrated_before_anything_uses_the_database():
    services = afp_services()
    assert services["migrate"]["command"] == ["db", "upgrade"]
    assert services["migrate"]["depends_on"]["postgres"]["condition"] == "service_healthy"
    for name, svc in services.items():
        if svc["command"][0] in ("worker", "serve", "flower"):
            assert svc["depends_on"]["migrate"]["condition"] == "service_completed_successfully", name
    job = next(d for d in K8S if d["kind"] == "Job")
    assert job["spec"]["template"]["spec"]["containers"][0]["args"] == ["db", "upgrade"]
    for name, dep in DEPLOYMENTS.items():
        main = dep["spec"]["template"]["spec"]["containers"][0]["args"]
        if main[0] in ("worker", "serve"):
            inits = [c["args"] for c in dep["spec"]["template"]["spec"].get("initContainers", [])]
            assert ["db", "current", "--check"] in inits, f"{name} starts without waiting for the schema"


def test_api_refuses_to_start_without_a_token():
    assert afp_services()["api"]["environment"]["AFP_API_TOKEN"].startswith("${AFP_API_TOKEN:?")
    refs = {r["secretRef"]["name"] for r in DEPLOYMENTS["api"]["spec"]["template"]["spec"]["containers"][0]
            ["envFrom"] if "secretRef" in r}
    assert any("AFP_API_TOKEN" in SECRETS[r]["stringData"] for r in refs)


def test_env_names_are_settings_the_code_reads_or_provider_keys():
    for name, svc in afp_services().items():
        bad = [k for k in svc["environment"] if not env_name_ok(k)]
        assert not bad, f"compose {name}: unknown settings {bad}"
    for doc in K8S:
        if doc["kind"] not in ("Deployment", "Job"):
            continue
        for c in pod_containers(doc):
            for ref in c.get("envFrom", []):
                kind, ref_name = ("configMapRef", CONFIGMAPS) if "configMapRef" in ref else ("secretRef", SECRETS)
                source = ref_name[ref[kind]["name"]]
                bad = [k for k in source.get("data", source.get("stringData", {})) if not env_name_ok(k)]
                assert not bad, f"{doc['metadata']['name']}: {ref[kind]['name']} sets unknown settings {bad}"
            assert all(env_name_ok(e["name"]) for e in c.get("env", []))
    interpolated = set(re.findall(r"\$\{([A-Z0-9_]+)", (INFRA / "compose.yaml").read_text()))
    for name in re.findall(r"^#?\s*([A-Z][A-Z0-9_]*)=", (INFRA / "env.example").read_text(), re.M):
        assert env_name_ok(name) or name in interpolated, f"env.example: {name} is read by nothing"
    required = set(re.findall(r"\$\{([A-Z0-9_]+):\?", (INFRA / "compose.yaml").read_text()))
    assert required <= set(re.findall(r"^([A-Z0-9_]+)=", (INFRA / "env.example").read_text(), re.M))


def test_timing_defaults_keep_hard_limit_below_visibility_below_lease():
    def check(values: dict) -> None:
        Settings(task_hard_time_limit_s=int(values["AFP_TASK_HARD_TIME_LIMIT_S"]),
                 visibility_timeout_s=int(values["AFP_VISIBILITY_TIMEOUT_S"]),
                 lease_expiry_s=int(values["AFP_LEASE_EXPIRY_S"])).check_timing()

    check(CONFIGMAPS["afpbench-config"]["data"])
    check(dict(re.findall(r"^(AFP_[A-Z_]+_S)=(\d+)$", (INFRA / "env.example").read_text(), re.M)))
    compose_env = afp_services()["control"]["environment"]
    check({k: re.search(r":-(\d+)}", v).group(1) for k, v in compose_env.items() if k.endswith("_S")})
    hard = int(CONFIGMAPS["afpbench-config"]["data"]["AFP_TASK_HARD_TIME_LIMIT_S"])
    for name, dep in DEPLOYMENTS.items():  # a stopping worker may finish the task it runs
        if dep["spec"]["template"]["spec"]["containers"][0]["args"][0] == "worker":
            assert dep["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] > hard, name


def test_no_secret_values_are_committed():
    for name, secret in SECRETS.items():
        assert "data" not in secret, f"{name}: use stringData placeholders, never encoded values"
        assert all(PLACEHOLDER in v for v in secret["stringData"].values()), f"{name} holds a real value"
    for name, svc in COMPOSE["services"].items():
        for key, value in (svc.get("environment") or {}).items():
            if SECRET_NAME.search(key):
                assert value is None or str(value).startswith(f"${{{key}"), f"compose {name}: {key} has a value"
            if value and "@" in str(value) and "://" in str(value):
                userinfo = str(value).split("://", 1)[1].split("@", 1)[0]
                assert ":" not in userinfo or "${" in userinfo, f"compose {name}: {key} embeds a password"
    for line in (INFRA / "env.example").read_text().splitlines():
        match = re.match(r"^#?\s*([A-Z][A-Z0-9_]*)=(.*)$", line)
        if match and (SECRET_NAME.search(match[1]) or "@" in match[2]):
            assert match[2] == "" or PLACEHOLDER in match[2], f"env.example: {match[1]} is not a placeholder"
    for path in [*INFRA.rglob("*"), REPO / "docs" / "OPERATIONS.md"]:
        if path.is_file() and path.name != ".env":  # infra/.env is the operator's own, git-ignored file
            assert not LOOKS_LIKE_A_REAL_KEY.search(path.read_text()), f"{path} contains something key-like"


def test_keda_scales_existing_exec_deployments_on_their_queue_and_on_unfinished_cells():
    targets = {s["spec"]["scaleTargetRef"]["name"]: s for s in SCALED}
    assert set(targets) <= set(DEPLOYMENTS)
    auths = {d["metadata"]["name"]: d for d in K8S if d["kind"] == "TriggerAuthentication"}
    for name, scaled in targets.items():
        worker_queues = queues_of(DEPLOYMENTS[name]["spec"]["template"]["spec"]["containers"][0]["args"])
        for trigger in scaled["spec"]["triggers"]:
            for ref in auths[trigger["authenticationRef"]["name"]]["spec"]["secretTargetRef"]:
                assert ref["key"] in SECRETS[ref["name"]]["stringData"]
            if trigger["type"] == "redis":
                assert trigger["metadata"]["listName"] in worker_queues
    for family in FAMILIES.values():
        scaled = targets[f"exec-{family.name}"]
        by_type = {t["type"]: t["metadata"] for t in scaled["spec"]["triggers"]}
        assert by_type["redis"]["listName"] == family.queue
        query = by_type["postgresql"]["query"]
        phases = set(re.search(r"phase IN \(([^)]*)\)", query)[1].replace("'", "").replace(" ", "").split(","))
        assert phases == {Phase.pending.value, Phase.queued.value}
        providers = set(re.search(r"provider IN \(([^)]*)\)", query)[1].replace("'", "").replace(" ", "").split(","))
        assert providers == {name for name, p in PROVIDERS.items() if p.family == family.name}


def test_every_referenced_configmap_and_secret_exists_and_keda_secrets_stay_out_of_pods():
    for doc in K8S:
        if doc["kind"] in ("Deployment", "Job"):
            for c in pod_containers(doc):
                for ref in c.get("envFrom", []):
                    if "configMapRef" in ref:
                        assert ref["configMapRef"]["name"] in CONFIGMAPS
                    else:
                        assert ref["secretRef"]["name"] in SECRETS
                        assert ref["secretRef"]["name"] != "afpbench-keda"


def test_kustomization_lists_existing_files_but_never_the_secret_template():
    resources = yaml.safe_load((INFRA / "k8s" / "kustomization.yaml").read_text())["resources"]
    assert all((INFRA / "k8s" / r).is_file() for r in resources)
    assert "secret.example.yaml" not in resources


def dockerfile_stages() -> list[tuple[str | None, str]]:
    """(stage name, text) per FROM of infra/Dockerfile, in order."""
    text = (INFRA / "Dockerfile").read_text()
    parts = re.split(r"^(?=FROM )", text, flags=re.M)[1:]
    return [(m[1] if (m := re.match(r"FROM \S+(?: AS (\S+))?", p, re.I)) else None, p) for p in parts]


def test_dockerfile_builds_a_non_root_image_whose_entrypoint_is_afpbench():
    stages = dockerfile_stages()
    final = stages[-1][1]
    assert re.search(r"^FROM python:3\.11-slim\s*$", final, re.M)
    user = re.findall(r"^USER (\S+)", final, re.M)
    assert user and user[-1] not in ("root", "0")
    assert re.search(r'^ENTRYPOINT \["afpbench"\]', final, re.M)
    for _, stage in stages:  # what is copied from the build context exists (copies between stages aside)
        for source in re.findall(r"^COPY (?!--from=)(.+) \S+$", stage, re.M):
            assert all((REPO / s).exists() for s in source.split()), source


def test_dockerfile_installs_the_built_wheel_never_the_source_tree():
    """The image runs the artifact tests/packaging checks: a wheel built in one stage, installed in the
    final one; never `pip install .` (or -e) of the sources."""
    stages = dockerfile_stages()
    text = (INFRA / "Dockerfile").read_text()
    assert not re.search(r"^RUN\b.*\bpip install\b(?:\s+-\S+)*\s+(?:\.|-e\b|--editable\b)", text, re.M)
    builders = [name for name, stage in stages[:-1] if re.search(r"^RUN\b.*\bpip wheel\b.*--no-deps", stage, re.M)]
    assert builders, "no stage builds the wheel (`pip wheel --no-deps ... .`)"
    final = stages[-1][1]
    assert re.search(rf"^COPY --from=({'|'.join(map(re.escape, filter(None, builders)))}) ", final, re.M), (
        "the final stage does not copy the wheel from the stage that built it"
    )
    assert re.search(r"^RUN\b.*\bpip install\b\s+\S*afpbench-\*\.whl", final, re.M)
    assert "COPY api" not in final and "COPY workers" not in final, "the final stage must not hold the sources"
