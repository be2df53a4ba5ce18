"""The workshop course: the lessons in ``notebooks/`` executed on a sandbox and written as HTML (``make demo``).

    lessons.py   which notebooks are lessons (``NN-topic.ipynb``), their titles, ``--lessons 00,03``
    execute.py   one lesson in a fresh kernel (nbclient), Ctrl-C and failures included
    pages.py     an executed lesson as an HTML page that works offline
    report.py    the one-line summaries, the index page and ``course.json`` (pure)
    build.py     all of it in order, into a folder

nbclient, nbformat and nbconvert (``slurmlab[course]``) are imported when a lesson runs, not here.
"""

from slurmlab.course.build import CourseBuild, build_course
from slurmlab.course.lessons import Lesson, discover, parse_selection, select
from slurmlab.course.report import BuildInfo, LessonResult, render_index, summary_line

__all__ = [
    "BuildInfo",
    "CourseBuild",
    "Lesson",
    "LessonResult",
    "build_course",
    "discover",
    "parse_selection",
    "render_index",
    "select",
    "summary_line",
]
