# tests/mpi/agreement.sh - sourced by tests/mpi/run.sh and run-gpu.sh.

# Bounds of the agreement of 2 ranks with one process (make test-mpi's
# step 2, make test-mpi-cuda's step 4), written down with the reason: the two
# runs sum the same float32 numbers in another order (one gradient of 32 rows
# against two of 16 added, each cut into its own blocks of 256 rows), so each
# step's values differ in their last bits, and Adam carries those differences
# on. Over the first 40 steps the losses measured 5.1e-8 apart (relative) at
# most, the weights and moments 1.2e-7 (absolute) and 3.2e-7 (relative to each
# tensor's largest value) on an AMD EPYC (Zen 4); an Intel Xeon's whole 100
# steps stayed within 5.3e-8 and 1.2e-7 (4.7e-7). The bounds
# leave a factor of about 20 above that, and are far below what a wrong share
# of the batch makes (a missing row moves the loss by 1e-2). The attention's
# key bias (in in_proj_bias) is left out of the maxima: its true gradient is 0
# (a softmax does not change when every score moves by the same amount), so
# what it gets is rounding noise, which Adam scales up to steps of the
# learning rate's size; there the two runs differ by 1e-5 to 3e-4 (printed).
LOSS_REL=1e-6
WEIGHT_ABS=2e-6
WEIGHT_REL=1e-5
# Over a longer run the last-bit differences do not stay that small. A ReLU
# unit whose input lies within a rounding of 0 on some row is on in one run
# and off in the other, and that row's whole contribution to the unit's
# gradient is then in one sum and not the other; from such a step on, the two
# trainings part at a rate of their own (the likeliest cause of what follows,
# not traced to the unit). The encoder-decoder's 100 steps
# measured on an AMD EPYC (Zen 4): losses 1 rounding apart (5e-8) up to step
# 94, then 1.0e-7, 2.1e-7, 1.1e-7, 1.6e-7, 4.7e-7 at steps 96-100, and the
# weights 4.4e-5 apart at the end; on an Intel Xeon the same 100 steps stayed
# at 5e-8 and 1.2e-7. When such a step comes is chance (it depends on how each
# CPU's vector width cuts the sums), so the tight bounds above are held over
# 40 steps, and the 100 steps' losses only to LOSS_REL_LONG: room for about
# eleven more doublings after the measured 4.7e-7, and still ten times below
# the 1e-2 of a missing row.
LOSS_REL_LONG=1e-3

# A log without its last column, the wall time (which no two runs share).
values() { cut -d, -f1-6 "$1"; }

# The largest relative difference of the train_loss column (4) of two logs.
loss_diff() {
    paste -d, <(values "$1") <(values "$2") | awk -F, 'NR > 1 { d = $4 - $10; if (d < 0) d = -d;
        m = ($4 < 0 ? -$4 : $4); if (d / m > x) x = d / m; n++ }
        END { printf "%d losses, max rel diff %.3g\n", n, x }'
}

# Whether a loss_diff line ($1) and a `compare --except in_proj_bias` line
# ($2) stay within the bounds above; prints the one that does not.
within_bounds() {
    local abs rel
    abs=$(sed 's/.*max abs diff \([^ ]*\) .*/\1/' <<<"$2")
    rel=$(sed 's/.*max rel diff \([^ ]*\) .*/\1/' <<<"$2")
    awk -v l="${1##* }" -v a="$abs" -v r="$rel" -v bl=$LOSS_REL -v ba=$WEIGHT_ABS \
        -v br=$WEIGHT_REL 'BEGIN {
            if (!(l <= bl)) print "the losses differ by more than " bl
            if (!(a <= ba && r <= br))
                print "the weights differ by more than " ba " (or " br " relative)"
            exit !(l <= bl && a <= ba && r <= br) }'
}

# Whether a loss_diff line ($1) stays within LOSS_REL_LONG; says so if not.
losses_within_long() {
    awk -v l="${1##* }" -v bl=$LOSS_REL_LONG 'BEGIN {
        if (!(l <= bl)) print "the losses differ by more than " bl
        exit !(l <= bl) }'
}
