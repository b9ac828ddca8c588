"""What each metric of the metric table (`requests.metrics`) is, in words, with its reference:
the text of the generated metrics reference (docs/gen_reference.py). Constants only; the
computations are in `calibcli.evaluation.metrics`. Every key of `METRICS` has an entry in
`DEFINITIONS` and every key of `KCLASS_BASE` one in `KCLASS_DEFINITIONS` (tests/test_docs.py);
the top-label metrics of K-class predictions are defined by `TOP_LABEL_DEFINITION`.
"""

from __future__ import annotations

# key -> (definition, reference); p the probability, y the 0/1 label, N the rows (weights
# count as rows), in table order.
DEFINITIONS: dict[str, tuple[str, str]] = {
    "log_loss": ("−mean(y ln p + (1−y) ln(1−p)), p clipped to [1e−15, 1−1e−15]; equal to scikit-learn's "
                 "`log_loss`.", "Good 1952"),
    "brier": ("mean((p − y)²); equal to scikit-learn's `brier_score_loss`.", "Brier 1950"),
    "auc": ("the probability that a positive outranks a negative, ties counted half; n/a with one class; "
            "equal to scikit-learn's `roc_auc_score`.", "Hanley & McNeil 1982"),
    "ece": ("10 equal-width bins, Σ (n_b/N)·|mean p − mean y|; `--ece-bins B` and `--ece-strategy quantile` "
            "(equal-mass bins) bin as scikit-learn's `calibration_curve`.",
            "Naeini, Cooper & Hauskrecht (AAAI 2015); Guo et al. (ICML 2017)"),
    "mce": ("the largest |mean p − mean y| over the same non-empty bins as ECE, shown with the rows of that "
            "bin (`MCE rows` in the table, `mce_count` in the JSON; the weight with `--weight-col`). Read the "
            "two together: a bin of n rows has a positive rate that moves by about √(p(1−p)/n) by chance "
            "alone, so an MCE of 0.5 from a bin of 2 rows is noise, while 0.05 from a bin of 5 000 rows is a "
            "real gap; with few rows in the top bin, look at ECE or fewer `--ece-bins`.",
            "Naeini et al. 2015"),
    "calbin": ("sort by p; for each of the n−s windows of s consecutive rows (`--calbin-window`, default 100) "
               "the mean of |p_i − window positive rate|; averaged over windows. The paper sums inside a "
               "window; calibcli divides by s so values lie in [0, 1]. Tied p share their mean label, so row "
               "order does not matter.", "Zitnik et al. 2012"),
    "cal_slope": ("b of the logistic recalibration logit P(y=1) = a + b·logit(p), fitted by maximum "
                  "likelihood; 1 when calibrated, below 1 when overconfident.", "Cox 1958"),
    "cal_intercept": ("a of the same logistic recalibration; 0 when calibrated.", "Cox 1958"),
    "spiegelhalter_z": ("z = Σ(y − p)(1 − 2p) / √Σ(1 − 2p)² p(1 − p), ≈ N(0, 1) under calibration.",
                        "Spiegelhalter 1986"),
    "spiegelhalter_p": ("the two-sided p-value of Spiegelhalter's z.", "Spiegelhalter 1986"),
    "field_ece": ("(1/N) Σ_z |Σ_{i∈z}(y_i − p_i)| over the values z of `--field-col`.",
                  "Pan et al. 2020, eq. 5"),
    "field_rce": ("(1/N) Σ_z N_z |Σ_{i∈z}(y_i − p_i)| / Σ_{i∈z}(y_i + 0.01) over the values z of "
                  "`--field-col`, as a fraction (0.12 = 12%).", "Pan et al. 2020, eq. 6"),
    "brier_mcb": ("CORP decomposition: p̂ = the PAV (isotonic) regression of y on p, tied p pooled, "
                  "weighted; MCB = S(p) − S(p̂) (miscalibration), S the mean Brier score, so "
                  "Brier = MCB − DSC + UNC exactly. Equal to `model_diagnostics.scoring.decompose(..., "
                  "scoring_function=SquaredError())`.", "Dimitriadis, Gneiting & Jordan, PNAS 2021"),
    "brier_dsc": ("CORP decomposition: DSC = S(ȳ) − S(p̂) (discrimination), ȳ the positive rate, S the mean "
                  "Brier score.", "Dimitriadis, Gneiting & Jordan, PNAS 2021"),
    "brier_unc": ("CORP decomposition: UNC = S(ȳ) (uncertainty, of the labels alone), S the mean Brier score.",
                  "Dimitriadis, Gneiting & Jordan, PNAS 2021"),
    "log_loss_mcb": ("the Brier MCB with S the log-loss (p clipped as for log-loss in S(p); 0 ln 0 = 0 in "
                     "S(p̂) and S(ȳ)); equal to `decompose(..., LogLoss())`.",
                     "Dimitriadis, Gneiting & Jordan, PNAS 2021"),
    "log_loss_dsc": ("the Brier DSC with S the log-loss.", "Dimitriadis, Gneiting & Jordan, PNAS 2021"),
    "log_loss_unc": ("the Brier UNC with S the log-loss.", "Dimitriadis, Gneiting & Jordan, PNAS 2021"),
    "corp_p": ("the resampling test of calibration: `--bands N` rounds draw labels y* ~ Bernoulli(p) at each "
               "row's p, refit PAV and compute Brier MCB*; p = (1 + #{MCB* ≥ MCB}) / (1 + N). Seeded by "
               "`--seed`; shown when bands are drawn (`--bands N`, or `--plot`) or asked for "
               "(`--metrics ...,corp-p`, 100 rounds). With `--weight-col`, the weight at each p is rounded "
               "to a count of rows (at least 1) for the draw and scaled back.",
               "Dimitriadis, Gneiting & Jordan 2021"),
    "smece": ("smooth ECE: the mean absolute kernel-smoothed residual E[p − y | p ≈ t] under the smoothed "
              "density of p, reflected Gaussian kernel of width σ at the σ where smECE_σ = σ; computed as "
              "`relplot.smECE` computes it (its grid and bisection), equal to it to 1e-6.",
              "Błasiok & Nakkiran, ICLR 2024"),
    "ece_debiased": ("√ of the debiased squared L2 calibration error over `--ece-bins` equal-mass bins (edges "
                     "as `calibration.get_equal_bins`), Σ_b (n_b/N)·[(mean p − mean y)² − "
                     "ȳ_b(1 − ȳ_b)/(n_b − 1)] (bins of at least 2 rows), clipped at 0; equal to "
                     "`calibration.lower_bound_scaling_ce(p, y, p=2, debias=True, num_bins=B)`.",
                     "Kumar, Liang & Ma, NeurIPS 2019"),
    "hl_stat": ("`--hl-groups` g (10) groups of equal mass in ascending p (tied p in one group), "
                "C = Σ_g (O_g − E_g)² / (E_g (1 − E_g/n_g)).", "Hosmer & Lemeshow 1980"),
    "hl_p": ("the p-value of C from χ² with g − 2 degrees of freedom. For forecasts not fitted on the "
             "evaluated rows C is nearer χ² with g degrees of freedom, so HL p is somewhat small: read it "
             "as a screen.", "Hosmer & Lemeshow 1980"),
    "ks": ("C_k = Σ_{i≤k}(y_i − p_i)/N in ascending p, σ = √(Σ p(1 − p))/N; KS = max|C|/σ. Equal to MAPIE's "
           "`kolmogorov_smirnov_statistic` on untied p; tied p form one step (C read at the end of each tie "
           "group, independent of row order) where MAPIE breaks ties by a random 1e-8 jitter.",
           "Arrieta-Ibarra, Gujral, Tannenbaum & Tygert, JMLR 2022"),
    "ks_p": ("the p-value of KS from the maximum of Brownian motion; equal to MAPIE's "
             "`kolmogorov_smirnov_p_value` on untied p.", "Tygert 2022"),
    "kuiper": ("(max C − min C)/σ with C and σ as for KS; equal to MAPIE's `kuiper_statistic` on untied p.",
               "Arrieta-Ibarra, Gujral, Tannenbaum & Tygert, JMLR 2022"),
    "kuiper_p": ("the p-value of Kuiper from the range of Brownian motion; equal to MAPIE's "
                 "`kuiper_p_value` on untied p.", "Tygert 2022"),
    "interval_width": ("beside Venn-Abers interval columns (`<col>_low`/`<col>_high`, or `--interval-cols`): "
                       "the mean width high − low of the rows' intervals.", "Vovk, Petej & Fedorova 2015"),
    "interval_coverage": ("beside interval columns: the share of rows whose interval holds the positive rate "
                          "of their ECE bin of p (the `--ece-bins`/`--ece-strategy` bins). A bin pools rows "
                          "with different intervals, so coverage is a proxy for validity: it falls when the "
                          "intervals are narrower than the spread of p inside a bin (more `--ece-bins` "
                          "sharpen it) and when the map meets data unlike its calibration set.",
                          "Vovk, Petej & Fedorova 2015"),
}

# K-class predictions: y the true class, p_k the probability of class k (rows summing to 1).
KCLASS_DEFINITIONS: dict[str, tuple[str, str]] = {
    "log_loss": ("−mean ln p_y, p_y clipped to [1e−15, 1−1e−15] as the binary one.", "Good 1952"),
    "brier": ("mean over rows of Σ_k (p_k − 1[y = k])², in [0, 2].", "Brier 1950"),
    "accuracy": ("the share of rows whose top class (the first k with the largest p_k) is y.", ""),
    "top_label_ece": ("the binary ECE (same `--ece-bins`, `--ece-strategy`) of the confidence max_k p_k "
                      "against whether the top class is y.", "Guo et al. 2017"),
    "top_label_mce": ("the binary MCE of the confidence max_k p_k against whether the top class is y.",
                      "Guo et al. 2017"),
    "classwise_ece": ("the mean over the K classes of the binary ECE of p_k against 1[y = k].",
                      "Kull et al. 2019"),
    "auc": ("macro one-vs-rest: the mean over classes of the binary AUC of p_k against 1[y = k], over the "
            "classes that have both positives and negatives in the rows.", "Hanley & McNeil 1982"),
}

TOP_LABEL_DEFINITION = ("the binary metric of the same name (same `--ece-bins`, `--hl-groups`, `--bands`, "
                        "`--seed`) of the confidence max_k p_k against whether the top class is y, exact from "
                        "the mergeable K-class state.")
