#!/usr/bin/env python3
# Server memory while 20 clients request a study export and read nothing, then the time of one
# full export over HTTP/1.0. Usage: scripts/export_slow_readers.py BINARY DB PORT (study 1 of DB,
# e.g. after `tunebase import ../shared/data/gpu/gemm/A100.json.gz --db DB`).
import socket, subprocess, sys, time, os
binary, db, port = sys.argv[1], sys.argv[2], sys.argv[3]
p = subprocess.Popen([binary, "serve", "--db", db, "--port", port], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
time.sleep(1.5)
def rss():
    for l in open(f"/proc/{p.pid}/status"):
        if l.startswith("VmRSS"): return int(l.split()[1])//1024
base = rss()
socks = []
for i in range(20):
    s = socket.create_connection(("127.0.0.1", int(port)))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.sendall(b"GET /v1/studies/1/export HTTP/1.1\r\nHost: x\r\n\r\n")
    socks.append(s)
peak = base
for t in range(16):
    time.sleep(0.5); peak = max(peak, rss())
print(f"{binary}: RSS before {base} MB, peak with 20 readers that do not read {peak} MB")
# one real reader: full body
s = socket.create_connection(("127.0.0.1", int(port)))
s.sendall(b"GET /v1/studies/1/export HTTP/1.0\r\n\r\n")
n=0; t0=time.time()
while True:
    b = s.recv(1<<20)
    if not b: break
    n+=len(b)
print(f"full export over HTTP/1.0: {n} bytes in {time.time()-t0:.2f} s")
p.terminate(); p.wait()
