# Where the Taylor-series translator looks: the cross-attention of its last
# decoder layer (the mean of its 8 heads) while it writes the expansion of
# the first test function. Row: the target token being predicted; column:
# the source token attended to. Each row sums to 1.
#
# Data: taylor_attention.dat, written by `build/09_translation --plot-data
# build/plots` from models/taylor.safetensors: "query key weight" lines, one
# block per target position, and two comment lines with the tokens as
# gnuplot tic labels ("# xtics: ..." source, "# ytics: ..." target).
# needs: taylor_attention.dat
if (!exists("terminal")) terminal = "pngcairo"
if (!exists("output")) output = "taylor_attention.png"
set terminal @terminal size 700,1100
set output output

xt = system("sed -n 's/^# xtics: //p' taylor_attention.dat")
yt = system("sed -n 's/^# ytics: //p' taylor_attention.dat")
eval "set xtics (" . xt . ") rotate by 90 right font ',9'"
eval "set ytics (" . yt . ") font ',8'"
set title "Cross-attention, last decoder layer (mean of the heads)"
set xlabel "source token"
set ylabel "target token being written"
stats "taylor_attention.dat" using 2 nooutput
S = STATS_max + 1
stats "taylor_attention.dat" using 1 nooutput
T = STATS_max + 1
set xrange [-0.5:S - 0.5]
set yrange [T - 0.5:-0.5]
set cbrange [0:1]
set palette defined (0 "#ffffff", 0.5 "#6baed6", 1 "#08306b")
unset key
plot "taylor_attention.dat" using 2:1:3 with image
