module rocketmq-bench/loadgen

go 1.21
