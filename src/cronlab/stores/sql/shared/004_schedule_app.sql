-- Which app's code declares a schedule (App.sync adds, changes and removes its own); NULL: one
-- added by hand (`cronlab schedule add`), which no app's sync removes.
ALTER TABLE schedules ADD COLUMN app TEXT;
