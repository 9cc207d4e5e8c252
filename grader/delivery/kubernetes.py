"""A batch as a Kubernetes Indexed Job: `completions` pods, each grading its slice of the
submissions (`grader grade --shard N`, the index from JOB_COMPLETION_INDEX) into one out-dir on
a shared volume, with `--resume`, so that a pod retried after an eviction keeps what its slice
has graded already.

The image is the course's: the full course (hidden suites included) installed with its Python
environment, `grader` on the PATH, at `course_root`. The volume is a PersistentVolumeClaim
that every pod mounts (ReadWriteMany where pods land on several nodes), holding the
submissions in one folder and receiving the out-dir in another.

The security context is the isolation level's (`grader.isolation.levels`), asked for with
`--isolation required`, so that a pod that cannot isolate learner code refuses to grade:

- `sandbox`: bubblewrap in the pod, as a non-root user with no capabilities. It needs
  unprivileged user namespaces, which the node's kernel must allow and the runtime's default
  seccomp and AppArmor profiles refuse (so both are Unconfined here), and a /proc it may mount
  again in its own pid namespace, which the runtime's masked /proc forbids (`procMount:
  Unmasked`, which Kubernetes allows only in a pod with its own user namespace, `hostUsers:
  false`).
- `uid`: no namespaces; the grader runs as root in the container, under the runtime's default
  seccomp profile, with the few capabilities it uses to run each task's workers as a uid of
  their own (setuid, setgid), to give them their folders (chown, fowner), to read what they
  wrote (dac_override) and to pause and end them (kill).
"""
from __future__ import annotations

import shlex
import sys
from collections.abc import Sequence

from grader.course import Task
from grader.delivery import Refused
from grader.running import budgets
from grader.schema.report import write_text_atomically

LEVELS = ("sandbox", "uid")
UID_CAPABILITIES = ["CHOWN", "DAC_OVERRIDE", "FOWNER", "KILL", "SETGID", "SETUID"]
NON_ROOT_UID = 1000                    # the sandbox level's user: any uid but root's
SUBMISSIONS_MOUNT, OUT_MOUNT = "/submissions", "/grading"
SECRET_KEY = "grader-secret"           # the key of the Kubernetes Secret that holds the course's secret
RETRIES_PER_SHARD = 2                  # a pod evicted or killed is started again this often, resuming
INCOMPLETE_EXIT, USAGE_EXIT = 3, 2     # grader grade's exit statuses (grader.cli)


def deliver(args, tasks: list[Task]) -> str:
    """`grader k8s-job`: the Job's YAML, on standard output or in `--output`."""
    if args.shards < 1 or (args.parallelism is not None and args.parallelism < 1) or args.jobs < 1:
        raise Refused("--shards, --parallelism and --jobs count from 1")
    manifest = indexed_job(
        name=args.name, image=args.image, shards=args.shards, parallelism=args.parallelism, claim=args.claim,
        submissions_path=args.submissions_path, out_path=args.out_path, level=args.level, jobs=args.jobs,
        tasks=[task.name for task in tasks] if args.tasks else [], gpus=args.gpus, course_root=args.course_root,
        secret=args.course_secret)
    text = to_yaml(manifest)
    if args.output is None:
        sys.stdout.write(text)
        return ""
    write_text_atomically(args.output, text)
    return (f"wrote {args.output}: kubectl apply -f {args.output}, then, once the Job is complete, grader summary "
            "on the out-dir")


def indexed_job(*, name: str, image: str, shards: int, claim: str, parallelism: int | None = None,
                submissions_path: str = "submissions", out_path: str = "grading", level: str = "sandbox",
                jobs: int = 1, tasks: Sequence[str] = (), gpus: int = 0, course_root: str = "/course",
                secret: str | None = None) -> dict:
    """The Job as a dict, ready to be written as YAML. `submissions_path` and `out_path` are
    folders inside the claim; `secret` names a Kubernetes Secret whose key SECRET_KEY holds the
    course's secret (`.grader-secret`), so that every pod draws a submission's hidden inputs
    alike and a regrading gets the same ones."""
    if level not in LEVELS:
        raise ValueError(f"the isolation level is one of {', '.join(LEVELS)}, not {level!r}")
    if shards < 1:
        raise ValueError("a Job needs one shard at the least")
    grade = ["grader", "grade", "--shard", str(shards), "--out-dir", OUT_MOUNT, "--resume", "--isolation", "required",
             "--jobs", str(jobs), *(["--tasks", *tasks] if tasks else [])]
    # the shell lists the submissions' folder (a glob's results are never split at spaces)
    script = f"exec {shlex.join(grade[:2])} {SUBMISSIONS_MOUNT}/* {shlex.join(grade[2:])}"
    cpu, memory = budgets.cpus(jobs), f"{budgets.memory_mb(jobs)}Mi"
    resources = {"cpu": str(cpu), "memory": memory, **({"nvidia.com/gpu": str(gpus)} if gpus else {})}
    mounts = [{"name": "batch", "mountPath": SUBMISSIONS_MOUNT, "subPath": submissions_path,
               # the uid level makes the submissions readable by their owner alone before grading
               "readOnly": level == "sandbox"},
              {"name": "batch", "mountPath": OUT_MOUNT, "subPath": out_path}]
    volumes = [{"name": "batch", "persistentVolumeClaim": {"claimName": claim}}]
    if secret:
        mounts.append({"name": "course-secret", "mountPath": f"{course_root}/.grader-secret", "subPath": SECRET_KEY,
                       "readOnly": True})
        volumes.append({"name": "course-secret", "secret": {"secretName": secret, "defaultMode": 0o400}})
    container = {"name": "grader", "image": image, "workingDir": course_root, "command": ["sh", "-c", script],
                 "env": [{"name": "OMP_NUM_THREADS", "value": str(cpu)}],
                 "resources": {"requests": resources, "limits": dict(resources)},
                 "securityContext": _container_security(level), "volumeMounts": mounts}
    pod = {"restartPolicy": "Never", "containers": [container], "volumes": volumes,
           "securityContext": _pod_security(level), **({"hostUsers": False} if level == "sandbox" else {})}
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/name": "grader", "grader/batch": name}},
        "spec": {
            "completionMode": "Indexed", "completions": shards, "parallelism": min(parallelism or shards, shards),
            "backoffLimitPerIndex": RETRIES_PER_SHARD,
            "podFailurePolicy": {"rules": [
                # bad usage is every shard's: stop the Job
                {"action": "FailJob", "onExitCodes": {"containerName": "grader", "operator": "In",
                                                      "values": [USAGE_EXIT]}},
                # every report of the slice is written and one says why it is incomplete: a retry changes nothing
                {"action": "FailIndex", "onExitCodes": {"containerName": "grader", "operator": "In",
                                                        "values": [INCOMPLETE_EXIT]}},
                # an eviction or preemption is not the shard's failure: its retry resumes
                {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
            ]},
            "template": {"metadata": {"labels": {"grader/batch": name}}, "spec": pod},
        },
    }


def _pod_security(level: str) -> dict:
    if level == "sandbox":
        return {"runAsNonRoot": True, "runAsUser": NON_ROOT_UID, "runAsGroup": NON_ROOT_UID,
                "fsGroup": NON_ROOT_UID}
    return {"runAsNonRoot": False, "runAsUser": 0, "runAsGroup": 0, "seccompProfile": {"type": "RuntimeDefault"}}


def _container_security(level: str) -> dict:
    if level == "sandbox":
        return {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}, "procMount": "Unmasked",
                "seccompProfile": {"type": "Unconfined"}, "appArmorProfile": {"type": "Unconfined"}}
    return {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"], "add": UID_CAPABILITIES}}


def to_yaml(manifest: dict) -> str:
    import yaml  # PyYAML: a dependency of transformers, so of the course
    return yaml.safe_dump(manifest, sort_keys=False, default_flow_style=False, width=100)
