module github.com/flashsale/platform/client

go 1.27.3
