"""Old path of report/compare.py, kept while workflow/rules/common_report.smk imports it from here;
remove this file once that import reads `from scaling.report.compare import compare_files`."""

from .report.compare import compare_files  # noqa: F401
