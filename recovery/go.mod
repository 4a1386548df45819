module github.com/flashsale/platform/recovery

go 1.26.8

require github.com/flashsale/platform v0.0.0

replace github.com/flashsale/platform => ../
