#!/usr/bin/env python3
# Time of large suggestion batches in one request on a space that cannot be enumerated (10
# parameters of 10 values, no constraint). Usage: scripts/batch_suggestions.py BINARY PORT
import json, subprocess, sys, time, urllib.request
binary, port = sys.argv[1], sys.argv[2]
import os
import tempfile
db = os.path.join(tempfile.mkdtemp(), "batch.db")
for suffix in ("", "-wal", "-shm"):
    try: os.remove(db + suffix)
    except FileNotFoundError: pass
tok = subprocess.run([binary, "token", "create", "b", "--db", db], capture_output=True, text=True).stdout.strip()
p = subprocess.Popen([binary, "serve", "--db", db, "--port", port], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
time.sleep(1.5)
U = f"http://127.0.0.1:{port}"
H = {"Content-Type": "application/json", "Authorization": "Bearer " + tok}
def call(path, body):
    r = urllib.request.Request(U + path, data=json.dumps(body).encode(), headers=H, method="POST")
    return json.loads(urllib.request.urlopen(r, timeout=600).read())
call("/v1/machines", {"name": "m1"})
call("/v1/studies", {"kernel": "kb", "machine": "m1", "budget": 5000, "seed": 1, "space": {"parameters": [{"name": f"p{i}", "type": "ordinal", "values": list(range(1, 11))} for i in range(10)]}})
for n in [50, 50, 50, 200, 400]:
    t = time.time(); j = call("/v1/studies/1/suggestions", {"client_id": "c", "n": n})
    keys = {json.dumps(s["config"], sort_keys=True) for s in j["suggestions"]}
    print(f"n={n} got {len(j['suggestions'])} distinct {len(keys)} in {time.time()-t:.1f}s", flush=True)
    for s in j["suggestions"]:
        call(f"/v1/trials/{s['trial_id']}/result", {"client_id": "c", "value": float(sum((v - 3) ** 2 for v in s["config"].values()))})
p.terminate(); p.wait()
