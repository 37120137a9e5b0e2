package bgtask
