#!/bin/bash
# Drive a real pgcli ($PGCLI) in tmux: connect (its completion refresh), \dt, \d daily_revenue, a
# query, \dn, \l; each action announced with SET application_name, which the recorder uses as label.
PORT=$1; OUT=$2
S=h1pgcli$PORT
tmux kill-session -t "$S" 2>/dev/null
export HOME=${PGCLI_HOME:-$(mktemp -d)}
tmux new-session -d -s "$S" -x 200 -y 50 \
  "$PGCLI --less-chatty --application-name h1/pgcli/connect -h 127.0.0.1 -p $PORT -U pitstop pitstop"
sleep 6
for cmd in '\dt' '\d daily_revenue' 'SELECT region, revenue FROM daily_revenue ORDER BY region' '\dn' '\l'; do
  label=$(echo "$cmd" | cut -c1-20)
  tmux send-keys -t "$S" -l "SET application_name = 'h1/pgcli/$label'"; tmux send-keys -t "$S" Enter; sleep 1
  tmux send-keys -t "$S" -l "$cmd"; tmux send-keys -t "$S" Enter; sleep 2
done
tmux capture-pane -t "$S" -p -S -300 > "$OUT"
tmux send-keys -t "$S" -l '\q'; tmux send-keys -t "$S" Enter; sleep 1
tmux kill-session -t "$S" 2>/dev/null
