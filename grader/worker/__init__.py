"""The worker's side of the grader: the only code that shares a process with learner code.

`python -m grader.worker.zygote` is started by the trusted side (`grader.isolation.worker_host`),
usually in the sandbox, which holds a copy of this package and nothing else of `grader`. So this
package imports nothing of `grader` outside itself (a project test checks it): the trust boundary
is this folder.
"""
