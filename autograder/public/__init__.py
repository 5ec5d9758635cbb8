"""Public tests: what ``grader.check`` runs in a student's notebook.

One module per assignment (``autograder.public.where_mlps_fail``, ...). They
check that names are defined and that answers have the right kind, shape and
dtype, and that functions run on a small input; they reveal no expected value.
They import only the generic layered checks of :mod:`autograder.checks`
(never a hidden test) and nothing of ``reference/``, so that the student
package (``python -m autograder student-package``, :mod:`autograder.student_package`)
can hold them without the hidden tests or the reference solutions.
"""
