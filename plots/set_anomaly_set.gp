# One test set of seed 004's set anomaly task as the model sees it: ten 8x8
# handwritten digits, nine of one digit and one of another (marked *), with
# the probability the trained model gives each of being the odd one (the
# softmax of its ten scores).
#
# Data: set_anomaly_set.dat, written by `build/11_set_anomaly --plot-data
# build/plots` from models/set_anomaly.safetensors: "x y pixel" lines (pixel
# 0..16, element i in columns 9i..9i+7) and a comment line "# labels: ..."
# with the digits and probabilities as gnuplot tic labels.
# needs: set_anomaly_set.dat
if (!exists("terminal")) terminal = "pngcairo"
if (!exists("output")) output = "set_anomaly_set.png"
set terminal @terminal size 1100,260
set output output

xt = system("sed -n 's/^# labels: //p' set_anomaly_set.dat")
eval "set xtics (" . xt . ") font ',11' scale 0"
unset ytics
set title "A test set: digit (* the odd one) and p(odd one) from the model"
set xrange [-0.5:89.5]
set yrange [7.5:-0.5]
set size ratio -1
set cbrange [0:16]
set palette defined (0 "#ffffff", 16 "#000000")
unset colorbox
unset key
plot "set_anomaly_set.dat" using 1:2:3 with image
