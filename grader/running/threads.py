"""Torch and the BLAS libraries on one thread in every grading process and in the watch loop,
unless the caller set otherwise: parallelism comes from grading several submissions at once.
OpenMP threads spin while they wait: as soon as anything else wants the same cores (another
grading, a busy machine), two threads per process run many times slower than one, while the
suites' small models gain little from a second thread on an idle machine.

The libraries read these variables when they are loaded, so a process sets them before it imports
numpy or torch; this module imports nothing, so that importing it loads neither.
"""

ONE_THREAD_ENV = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
