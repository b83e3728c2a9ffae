"""The execution workers each deployment mode declares, one per provider family, rendered from the
provider table (workers/providers/families.py: a family's queue, worker threads and replica cap, and the
provider names whose unfinished cells wake it).

Each infra file holds them between two marker lines; tests/unit/test_infra.py checks that the files hold
exactly what this renders. After a change to the table, write them: `python -m tests.infra_workers`.
"""

from __future__ import annotations

import sys
from pathlib import Path

from afpbench.workers.providers.families import FAMILIES, PROVIDERS, Family

INFRA = Path(__file__).resolve().parents[1] / "infra"
BEGIN = ">>> exec workers, one per provider family: generated from workers/providers/families.py"
END = "<<< exec workers (python -m tests.infra_workers)"

PROCFILE = (
    "exec_{name}: afpbench worker --queues {queue} --pool threads --concurrency {threads} "
    "--hostname exec-{name}@%h\n"
)
COMPOSE = """  exec-{name}:
    <<: *worker
    command: ["worker", "--queues", "{queue}", "--pool", "threads", "--concurrency", "{threads}",
              "--hostname", "exec-{name}@%h"]

"""
DEPLOYMENT = """# Provider calls of the {name} family (queue {queue}). KEDA sets the replicas (keda.yaml);
# the grace period is the hard time limit + 60 s, so a running task ends before the pod dies.
apiVersion: apps/v1
kind: Deployment
metadata:
  name: exec-{name}
  namespace: afpbench
  labels:
    app.kubernetes.io/name: afpbench
    app.kubernetes.io/component: exec-{name}
spec:
  selector:
    matchLabels:
      app.kubernetes.io/name: afpbench
      app.kubernetes.io/component: exec-{name}
  template:
    metadata:
      labels:
        app.kubernetes.io/name: afpbench
        app.kubernetes.io/component: exec-{name}
    spec:
      securityContext:
        runAsNonRoot: true
        runAsUser: 10001
        runAsGroup: 10001
        seccompProfile:
          type: RuntimeDefault
      terminationGracePeriodSeconds: 660
      initContainers:
        # Wait until `afpbench db upgrade` (migrate-job.yaml) has brought the schema to this revision.
        - name: wait-for-schema
          image: afpbench:0.1.0
          args: ["db", "current", "--check"]
          envFrom:
            - configMapRef:
                name: afpbench-config
            - secretRef:
                name: afpbench-core
          securityContext:
            allowPrivilegeEscalation: false
            capabilities:
              drop: ["ALL"]
      containers:
        - name: exec-{name}
          image: afpbench:0.1.0
          args: ["worker", "--queues", "{queue}", "--pool", "threads", "--concurrency", "{threads}",
                 "--hostname", "exec-{name}@%h"]
          envFrom:
            - configMapRef:
                name: afpbench-config
            - secretRef:
                name: afpbench-core
            - secretRef:
                name: afpbench-provider-keys
                optional: true
          resources:
            requests:
              cpu: "100m"
              memory: "256Mi"
            limits:
              memory: "1Gi"
          securityContext:
            allowPrivilegeEscalation: false
            capabilities:
              drop: ["ALL"]
---
"""
SCALED_OBJECT = """apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata:
  name: exec-{name}
  namespace: afpbench
spec:
  scaleTargetRef:
    name: exec-{name}
  minReplicaCount: 0
  maxReplicaCount: {max_workers}
  pollingInterval: 15
  cooldownPeriod: 300
  triggers:
    - type: redis
      metadata:
        address: redis.afpbench.svc:6379
        databaseIndex: "0"
        listName: {queue}
        listLength: "16"
        activationListLength: "0"
      authenticationRef:
        name: afpbench-redis
    - type: postgresql
      metadata:
        host: postgres.afpbench.svc
        port: "5432"
        userName: afpbench
        dbName: afpbench
        sslmode: disable
        query: "SELECT count(*) FROM cell WHERE phase IN ('pending', 'queued') AND provider IN ({providers})"
        targetQueryValue: "500"
        activationTargetQueryValue: "0"
      authenticationRef:
        name: afpbench-postgres
---
"""
TEMPLATES = {
    INFRA / "Procfile": PROCFILE,
    INFRA / "compose.yaml": COMPOSE,
    INFRA / "k8s" / "workers.yaml": DEPLOYMENT,
    INFRA / "k8s" / "keda.yaml": SCALED_OBJECT,
}


def block(template: str, family: Family) -> str:
    providers = ", ".join(f"'{p}'" for p in sorted(PROVIDERS) if PROVIDERS[p].family == family.name)
    return template.format(name=family.name, queue=family.queue, threads=family.worker_threads,
                           max_workers=family.max_workers, providers=providers)


def rendered(path: Path) -> str:
    """The file with the lines between its markers replaced by one block per family."""
    lines = path.read_text().splitlines(keepends=True)
    begin = [i for i, line in enumerate(lines) if BEGIN in line]
    end = [i for i, line in enumerate(lines) if END in line]
    if len(begin) != 1 or len(end) != 1 or begin[0] > end[0]:
        raise ValueError(f"{path}: needs one line with {BEGIN!r} and, after it, one with {END!r}")
    blocks = "".join(block(TEMPLATES[path], family) for family in FAMILIES.values())
    return "".join([*lines[: begin[0] + 1], blocks, *lines[end[0]:]])


def main() -> None:
    for path in TEMPLATES:
        text = rendered(path)
        if text != path.read_text():
            path.write_text(text)
            print(f"wrote {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
