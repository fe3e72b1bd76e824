"""Factorize a planted Boolean-rank-8 matrix and print what BANMF found.

python scripts/quickstart.py [--quick]
"""

import argparse
import time

import banmf


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument(
        "--quick",
        action="store_true",
        help="a smoke run: 400×100 instead of 2000×500, 100 iterations a start instead of 1000",
    )
    args = p.parse_args(argv)
    n, m, max_iter = (400, 100, 100) if args.quick else (2000, 500, 1000)
    X, W_true, H_true = banmf.make_boolean(n, m, 8, density=0.2, noise=0.01, random_state=0)
    print(f"X: {X.shape[0]}×{X.shape[1]}, {X.nnz} nonzeros (planted rank 8, 1% flips)")
    print(f"planted factors' error: {banmf.boolean_error(X, W_true, H_true)}")
    for reg in (None, "logspace"):
        start = time.perf_counter()
        model = banmf.BANMF(8, regularization=reg, max_iter=max_iter, random_state=0).fit(X)
        name = "BANMF" if reg is None else "Reg-BANMF"
        print(
            f"{name:>9}: error {model.reconstruction_err_} "
            f"(relative {model.relative_error_:.4f}; grid {model.booleanized_err_}, per-factor "
            f"thresholds {model.unpolished_err_}, polish {model.reconstruction_err_}; best of "
            f"{model.n_init_} starts), {time.perf_counter() - start:.2f} s"
        )


if __name__ == "__main__":
    main()
