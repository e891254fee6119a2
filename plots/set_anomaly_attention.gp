# Where the set anomaly model looks: the self-attention of its last encoder
# layer (the mean of the heads) over the test set of set_anomaly_set.png.
# Row: the element whose representation is computed; column: the element
# attended to. Each row sums to 1. There is no positional encoding, so only
# the images themselves decide where attention goes.
#
# Data: set_anomaly_attention.dat, written by `build/11_set_anomaly
# --plot-data build/plots`: "query key weight" lines and a comment line
# "# labels: ..." with each element's digit (* the odd one) and p(odd one).
# needs: set_anomaly_attention.dat
if (!exists("terminal")) terminal = "pngcairo"
if (!exists("output")) output = "set_anomaly_attention.png"
set terminal @terminal size 700,640
set output output

lab = system("sed -n 's/^# labels: //p' set_anomaly_attention.dat")
eval "set xtics (" . lab . ") rotate by 90 right font ',10'"
eval "set ytics (" . lab . ") font ',10'"
set title "Self-attention, last encoder layer (mean of the heads)"
set xlabel "element attended to"
set ylabel "element"
set xrange [-0.5:9.5]
set yrange [9.5:-0.5]
set size ratio -1
set cbrange [0:*]
set palette defined (0 "#ffffff", 0.5 "#6baed6", 1 "#08306b")
unset key
plot "set_anomaly_attention.dat" using 2:1:3 with image
