"""vision-autograder: Otter-based grading for a deep-learning course's vision labs.

Subpackages and modules:

* :mod:`autograder.checks` — layered checks for students' answers (defined,
  type, shape, dtype, values) and the per-assignment hidden tests;
* :mod:`autograder.public` — the public tests students' notebooks run;
* :mod:`autograder.data` — Fashion-MNIST, found on disk or downloaded;
* :mod:`autograder.build` — master notebook to student version and autograder zip;
* :mod:`autograder.grade` — grading submissions with the autograder zip;
* :mod:`autograder.cli` — ``python -m autograder build|grade|demo|train|student-package``;
* :mod:`autograder.student_package` — the wheel students install: the public
  tests, the layered checks and the data loaders, no hidden tests and no
  ``reference/`` (in that wheel only those modules are here).
"""

__version__ = "0.1.0"
