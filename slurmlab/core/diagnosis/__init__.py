"""Diagnosis: pure judgement of what the doctor gathered (verdicts, evidence, fixes). No I/O."""
