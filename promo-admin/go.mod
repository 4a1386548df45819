module github.com/flashsale/platform/promo-admin

go 1.26.8

require github.com/flashsale/platform v0.0.0

replace github.com/flashsale/platform => ../
