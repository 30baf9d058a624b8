// Command loadgen is the closed-loop load generator of bench/vs_upstream.py: each connection
// sends its request frame, reads the whole response frame and sends the request again. It is
// written in Go so that the generator, not the server under test, is the cheap side of a
// 2-core machine. It prints one line: "<responses> <seconds>" counted after the warm-up.
package main

import (
	"bufio"
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:9876", "server address")
	conns := flag.Int("conns", 100, "connections, each with one request in flight")
	seconds := flag.Float64("seconds", 4, "measured seconds")
	warmup := flag.Float64("warmup", 0.5, "seconds before counting")
	frames := flag.String("frames", "", "file of request frames (length-prefixed, as on the wire); with -cycle k, connection i sends frames i*k .. i*k+k-1 in turn (mod count)")
	cycle := flag.Int("cycle", 1, "frames each connection sends in turn (e.g. registers of changing data versions)")
	flag.Parse()

	data, err := os.ReadFile(*frames)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	var requests [][]byte
	for len(data) >= 4 {
		n := int(binary.BigEndian.Uint32(data)) + 4
		if n > len(data) {
			fmt.Fprintln(os.Stderr, "truncated frame in", *frames)
			os.Exit(2)
		}
		requests = append(requests, data[:n])
		data = data[n:]
	}
	if len(requests) == 0 {
		fmt.Fprintln(os.Stderr, "no frames in", *frames)
		os.Exit(2)
	}

	var counting atomic.Bool
	var count atomic.Int64
	var failed atomic.Value
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < *conns; i++ {
		c, err := net.Dial("tcp", *addr)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		c.(*net.TCPConn).SetNoDelay(true)
		wg.Add(1)
		mine := make([][]byte, *cycle)
		for j := range mine {
			mine[j] = requests[(i*(*cycle)+j)%len(requests)]
		}
		go func(c net.Conn, mine [][]byte) {
			defer wg.Done()
			defer c.Close()
			reader := bufio.NewReaderSize(c, 1<<16)
			var head [4]byte
			body := make([]byte, 1<<16)
			for next := 0; ; next = (next + 1) % len(mine) {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := c.Write(mine[next]); err != nil {
					failed.Store(err.Error())
					return
				}
				if _, err := io.ReadFull(reader, head[:]); err != nil {
					failed.Store(err.Error())
					return
				}
				n := int(binary.BigEndian.Uint32(head[:]))
				if n > len(body) {
					body = make([]byte, n)
				}
				if _, err := io.ReadFull(reader, body[:n]); err != nil {
					failed.Store(err.Error())
					return
				}
				// The response code, from the JSON header: a refused request is not a response.
				headerLen := int(binary.BigEndian.Uint32(body[:4]) & 0xFFFFFF)
				if !okCode(body[4 : 4+headerLen]) {
					failed.Store("server answered a non-zero code")
					return
				}
				if counting.Load() {
					count.Add(1)
				}
			}
		}(c, mine)
	}
	time.Sleep(time.Duration(*warmup * float64(time.Second)))
	counting.Store(true)
	start := time.Now()
	time.Sleep(time.Duration(*seconds * float64(time.Second)))
	counting.Store(false)
	elapsed := time.Since(start).Seconds()
	n := count.Load()
	close(stop)
	if msg, ok := failed.Load().(string); ok {
		fmt.Fprintln(os.Stderr, "loadgen:", msg)
		os.Exit(1)
	}
	fmt.Printf("%d %.6f\n", n, elapsed)
	os.Exit(0)
}

// okCode reports whether a JSON remoting header carries "code":0.
func okCode(header []byte) bool {
	const key = `"code":`
	for i := 0; i+len(key) < len(header); i++ {
		if string(header[i:i+len(key)]) == key {
			j := i + len(key)
			for j < len(header) && header[j] == ' ' {
				j++
			}
			return j < len(header) && header[j] == '0' && (j+1 == len(header) || header[j+1] < '0' || header[j+1] > '9')
		}
	}
	return false
}
