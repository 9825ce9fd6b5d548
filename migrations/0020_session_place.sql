ALTER TABLE `sessions` ADD `seen_latitude` real;--> statement-breakpoint
ALTER TABLE `sessions` ADD `seen_longitude` real;--> statement-breakpoint
ALTER TABLE `sessions` ADD `seen_place_at` integer;