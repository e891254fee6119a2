# The self-attention weights of the trained reverse-task model on one test
# sequence: row = query position (the output being predicted), column = key
# position (the input token attended to). A model that has learned to
# reverse puts its weight on the anti-diagonal: output i looks at input
# 15 - i.
#
# Data: attention_map.dat, written by `build/08_training --demo` into
# build/plots: "query key weight" lines, one block per query, and a first
# comment line "# input: ..." with the test sequence.
# needs: attention_map.dat
if (!exists("terminal")) terminal = "pngcairo"
if (!exists("output")) output = "attention_map.png"
set terminal @terminal size 640,600
set output output

input = system("sed -n 's/^# input: //p' attention_map.dat")
set title "Encoder self-attention after training (layer 1, head 1)\ninput: " . input
set xlabel "key position (input token)"
set ylabel "query position (output token)"
stats "attention_map.dat" using 1 nooutput
n = STATS_max + 1
set xrange [-0.5:n - 0.5]
set yrange [n - 0.5:-0.5]
set xtics 0,1
set ytics 0,1
set cbrange [0:1]
set palette defined (0 "#ffffff", 0.5 "#6baed6", 1 "#08306b")
set size square
unset key
plot "attention_map.dat" using 2:1:3 with image
