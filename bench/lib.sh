# Shared by the bench scripts (source it).

# medians: lines of numbers in columns on stdin -> one line with the median
# of each column (the mean of the middle two for an even count), never in
# exponent form (CONVFMT: a mean of 1.05M req/s is printed whole, not as
# 1.05472e+06, which bc cannot read).
medians() {
  awk -v CONVFMT=%.10g '{ for (i = 1; i <= NF; i++) v[i, NR] = $i; if (NF > nf) nf = NF } END {
    for (i = 1; i <= nf; i++) {
      n = 0; for (j = 1; j <= NR; j++) a[++n] = v[i, j]
      for (x = 1; x <= n; x++) for (y = x + 1; y <= n; y++) if (a[y] < a[x]) { t = a[x]; a[x] = a[y]; a[y] = t }
      printf "%s%s", (n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2), (i < nf ? " " : "\n")
    } }'
}
