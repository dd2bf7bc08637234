#!/usr/bin/env python3
"""Independent numpy reference of InfiniGen's skew and partial scores, for the unit tests.

Reads {"q": [n][d], "k": [m][d], "n_partial": r} and prints {"channels": [...], "scores": [n][m]}:
A = V of the SVD Q = U S Vᵀ; the r channels of Q A with the largest column sums of |Q A|
(increasing order); scores = (Q A)[:, channels] · ((K A)[:, channels])ᵀ. The sign of each
singular vector is arbitrary, and neither the chosen channels nor the scores depend on it.
"""
import json
import sys

import numpy as np


def main():
    case = json.load(open(sys.argv[1]))
    q = np.asarray(case["q"], dtype=np.float64)
    k = np.asarray(case["k"], dtype=np.float64)
    r = case["n_partial"]
    _, _, vt = np.linalg.svd(q, full_matrices=True)
    a = vt.T
    weight = np.abs(q @ a).sum(axis=0)
    channels = sorted(np.argsort(-weight, kind="stable")[:r].tolist())
    scores = (q @ a)[:, channels] @ (k @ a)[:, channels].T
    json.dump({"channels": channels, "scores": scores.tolist()}, sys.stdout)


if __name__ == "__main__":
    main()
